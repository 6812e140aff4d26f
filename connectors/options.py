"""A connector's settings as a pydantic model: declared once, every problem listed at once.

Each connector declares its ``[sources.options]`` as a ``ConnectorOptions`` model and the part
of a ``[[sources]]`` entry it reads (``path``, ``url``, ``options``) as a ``ConnectorSettings``
model. ``config_problems`` turns pydantic's ``ValidationError`` into ``(key, message)`` pairs
keyed by path (``url``, ``options.table``, ``options.columns.colour``), in the project's words;
``load`` returns the validated model or raises ``ConnectorConfigError`` listing them all.

Field rules are ``Annotated`` validators that raise ``invalid(message)``. Rules across fields go
in ``ConnectorSettings.rules``: they run in the model's (wrap) validator beside the field
errors, so a config with a bad field and a broken cross-field rule hears about both (pydantic
skips ``after`` model validators once a field has failed). They read the raw entry, as given.

Imports nothing heavier than pydantic: the sql connector uses it without ``requests``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    ValidatorFunctionWrapHandler,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from connectors.base import ConnectorConfigError
from reconciler.model import VersionState

__all__ = [
    "ENV_PREFIX",
    "ConnectorOptions",
    "ConnectorSettings",
    "HttpPolicyOptions",
    "Loc",
    "NonNegativeInt",
    "NonNegativeSeconds",
    "PositiveInt",
    "PositiveSeconds",
    "SecretVariable",
    "StatusMap",
    "check",
    "checked_url",
    "config_problems",
    "invalid",
    "is_integer",
    "is_number",
    "load",
    "refuse",
    "reserved_variable",
    "text",
    "unset",
]

#: Variables with this prefix are config overrides, never a secret's home.
ENV_PREFIX = "RECONCILER_"

#: A key path inside the validated value, e.g. ``("options", "columns", "colour")``.
Loc = tuple[str | int, ...]
_Settings = TypeVar("_Settings", bound="ConnectorSettings")


def invalid(message: str) -> PydanticCustomError:
    """The error a validator raises for a value that breaks a rule; ``message`` is shown as is."""
    return PydanticCustomError("connector_option", "{message}", {"message": message})


def refuse(problems: Iterable[tuple[Loc, str]], title: str = "options") -> ValidationError:
    """One error carrying several problems, each at its path (relative to where it is raised)."""
    return ValidationError.from_exception_data(
        title,
        [InitErrorDetails(type=invalid(message), loc=loc, input=None) for loc, message in problems],
    )


def _merge(
    handler: ValidatorFunctionWrapHandler,
    data: Any,
    *,
    title: str,
    more: Callable[[], list[tuple[Loc, str]]] = list,
    reword: Callable[[str, Loc], str | None] = lambda kind, loc: None,
) -> Any:
    """Validate with ``handler``; add the ``more`` problems and reword errors; raise them all."""
    errors: list[InitErrorDetails] = []
    model = None
    try:
        model = handler(data)
    except ValidationError as exc:
        for error in exc.errors():
            message = reword(error["type"], error["loc"]) or _message(error["msg"])
            errors.append(
                InitErrorDetails(
                    type=PydanticCustomError(error["type"], "{message}", {"message": message}),
                    loc=error["loc"],
                    input=error.get("input"),
                )
            )
    errors += [
        InitErrorDetails(type=invalid(message), loc=loc, input=None) for loc, message in more()
    ]
    if errors:
        raise ValidationError.from_exception_data(title, errors)
    return model


def _message(text: str) -> str:
    return text.removeprefix("Value error, ")


class ConnectorOptions(BaseModel):
    """A connector's ``[sources.options]``: unknown keys refused, secrets never accepted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: What an unknown key is told.
    unknown_option: ClassVar[str] = "unknown option"
    #: Keys that would put a secret in the config file, and what they are told instead.
    secret_keys: ClassVar[frozenset[str]] = frozenset()
    secret_hint: ClassVar[str] = (
        "secrets are never read from the config file; name an environment variable instead"
    )

    @model_validator(mode="wrap")
    @classmethod
    def _worded(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        def reword(kind: str, loc: Loc) -> str | None:
            if kind == "dict_type" and not loc:
                return "a table of options"
            if kind != "extra_forbidden" or len(loc) != 1:
                return None
            return cls.secret_hint if loc[0] in cls.secret_keys else cls.unknown_option

        return _merge(handler, data, title=cls.__name__, reword=reword)


class ConnectorSettings(BaseModel):
    """The part of a ``[[sources]]`` entry a connector reads: ``path``, ``url``, ``options``.

    Subclasses narrow ``path`` and ``url`` with validators, declare ``options`` and add rules
    across fields in ``rules``. Other keys of the entry (name, trigger, ttl) are the
    reconciler's and are ignored here.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    path: str | None = None
    url: str | None = None
    options: ConnectorOptions = Field(default_factory=ConnectorOptions)

    @classmethod
    def rules(cls, given: Mapping[str, Any], options: Mapping[str, Any]) -> list[tuple[Loc, str]]:
        """Problems across fields, read from the raw entry ``given`` and its ``options``."""
        return []

    @model_validator(mode="wrap")
    @classmethod
    def _every_problem(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        given: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
        raw_options = given.get("options")
        options: Mapping[str, Any] = raw_options if isinstance(raw_options, Mapping) else {}
        return _merge(handler, data, title=cls.__name__, more=lambda: cls.rules(given, options))


def _entry(settings: Any) -> dict[str, Any]:
    return {
        "path": getattr(settings, "path", None),
        "url": getattr(settings, "url", None),
        "options": getattr(settings, "options", None) or {},
    }


def _problems(exc: ValidationError) -> list[tuple[str, str]]:
    return [
        (".".join(str(part) for part in error["loc"]) or "options", _message(error["msg"]))
        for error in exc.errors()
    ]


def config_problems(model: type[ConnectorSettings], settings: Any) -> list[tuple[str, str]]:
    """Every ``(key, message)`` problem of a source's settings under ``model``; [] when none."""
    try:
        model.model_validate(_entry(settings))
    except ValidationError as exc:
        return _problems(exc)
    return []


def load(model: type[_Settings], settings: Any) -> _Settings:
    """The validated settings; ``ConnectorConfigError`` listing every problem otherwise."""
    try:
        return model.model_validate(_entry(settings))
    except ValidationError as exc:
        raise ConnectorConfigError(
            f"source {settings.name!r}: " + "; ".join(f"{k}: {m}" for k, m in _problems(exc))
        ) from None


# -- rules ---------------------------------------------------------------------------------


def is_integer(value: Any) -> bool:
    """An int, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """An int or a float, not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def check(test: Callable[[Any], bool], message: str) -> PlainValidator:
    """A validator that keeps a value passing ``test`` as it is and refuses any other."""

    def validate(value: Any) -> Any:
        if not test(value):
            raise invalid(message)
        return value

    return PlainValidator(validate)


def text(message: str) -> PlainValidator:
    """A validator of a non-empty string (blank is refused with ``message``)."""
    return check(lambda v: isinstance(v, str) and bool(v.strip()), message)


def unset(message: str) -> PlainValidator:
    """A validator for a key this connector does not use: empty is fine, anything else not."""

    def validate(value: Any) -> None:
        if value:
            raise invalid(message)

    return PlainValidator(validate)


def checked_url(
    problems: Callable[[str], Iterable[str | tuple[str, str]]], *, missing: str | None = None
) -> PlainValidator:
    """A validator of a source's ``url``: refused with every message ``problems`` finds (plain
    messages, or ``(key, message)`` pairs such as ``httpclient.base_url_problems`` gives).

    An empty url is unset (None), or refused with ``missing`` when the connector needs one
    (then give the field ``Field(default=None, validate_default=True)``).
    """

    def validate(value: Any) -> str | None:
        if not value:
            if missing is not None:
                raise invalid(missing)
            return None
        url = str(value)
        found = [item if isinstance(item, str) else item[1] for item in problems(url)]
        if found:
            raise refuse(((), message) for message in found)
        return url

    return PlainValidator(validate)


PositiveInt = Annotated[int, check(lambda v: is_integer(v) and v >= 1, "a positive integer")]
NonNegativeInt = Annotated[int, check(lambda v: is_integer(v) and v >= 0, "a non-negative integer")]
PositiveSeconds = Annotated[
    float, check(lambda v: is_number(v) and v > 0, "a positive number of seconds")
]
NonNegativeSeconds = Annotated[
    float, check(lambda v: is_number(v) and v >= 0, "a non-negative number of seconds")
]


def reserved_variable(value: str) -> str | None:
    """Why an environment variable cannot hold a secret (a config override's name), or None."""
    if value.upper().startswith(ENV_PREFIX):
        return (
            f"{value}: variables starting with {ENV_PREFIX} are read as config overrides; "
            "name the secret's variable otherwise"
        )
    return None


def _secret_variable(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid("the name of an environment variable")
    reason = reserved_variable(value)
    if reason is not None:
        raise invalid(reason)
    return value


#: An option naming the environment variable that holds a secret (``url_env``, ``token_env``).
SecretVariable = Annotated[str, PlainValidator(_secret_variable)]


def _status_map(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise invalid("a table mapping source status values to version states")
    allowed = {state.value for state in VersionState}
    wrong = [
        ((str(name),), f"must be one of {'|'.join(sorted(allowed))}, got {target!r}")
        for name, target in value.items()
        if not isinstance(target, str) or target.lower() not in allowed
    ]
    if wrong:
        raise refuse(wrong)
    return {str(name): target for name, target in value.items()}


#: ``status_map``: source status value -> version state (``records.parse_status_map`` reads it).
StatusMap = Annotated[dict[str, str], PlainValidator(_status_map)]


def _hosts(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(h, str) and h.strip() for h in value):
        raise invalid("a list of host names, like ['docs.example.com']")
    wrong = [h for h in value if "/" in h or ":" in h]
    if wrong:
        raise invalid(f"host names only, without scheme or port: {wrong[0]!r}")
    return [h.strip().lower() for h in value]


class HttpPolicyOptions(ConnectorOptions):
    """Timeouts and retries of an HTTP connector's session (``httpclient.HttpPolicy``)."""

    connect_timeout: PositiveSeconds | None = None
    read_timeout: PositiveSeconds | None = None
    retries: NonNegativeInt | None = None
    backoff_factor: NonNegativeSeconds | None = None
    backoff_max: NonNegativeSeconds | None = None
    deadline: PositiveSeconds | None = None
    max_response_bytes: PositiveInt | None = None
    redirect_hosts: Annotated[list[str], PlainValidator(_hosts)] | None = None

    def policy_options(self) -> dict[str, Any]:
        """The policy settings given (for ``HttpPolicy.from_options``)."""
        given = {key: getattr(self, key) for key in HttpPolicyOptions.model_fields}
        return {key: value for key, value in given.items() if value is not None}
