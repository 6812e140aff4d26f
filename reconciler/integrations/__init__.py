"""Retrievers for the frameworks users retrieve with, each building its filter per query.

``reconciler.integrations.langchain`` (extra ``langchain``) and
``reconciler.integrations.llamaindex`` (extra ``llamaindex``) hand out a
``VersionAwareRetriever`` each; ``reconciler.integrations.retrieving`` is what both share,
free of either framework: the deployment's layout (``Route``) and one search at the instant
of the query, over every collection the route needs. Nothing here imports a framework until
its module is imported, and ``import reconciler`` imports none of this package.
"""
