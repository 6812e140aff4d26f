"""serve's scheduler stops on a SIGTERM whichever thread the kernel gives it to.

Python runs a signal's handler on the main thread only, and APScheduler's blocking scheduler
keeps the main thread waiting until its next job: days for a yearly job, for ever with none.
A SIGTERM delivered to another thread (serve runs one a watched source, and watchdog its own)
was handled only then, and serve did not stop (a CI run's serve ignored SIGTERM for 60 s).
The scheduler now wakes its main thread every ``WAKE`` seconds."""

from __future__ import annotations

import signal
import threading
import time

from reconciler.scheduling import WAKE, GracefulStop, blocking_scheduler


def test_a_sigterm_given_to_another_thread_stops_the_scheduler() -> None:
    scheduler = blocking_scheduler()  # (no job: the old main loop waited for ever)
    stop = GracefulStop(scheduler)
    kept = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    stop.install()
    rescued: list[float] = []

    def another_thread() -> None:
        time.sleep(0.3)
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)  # (to this thread alone)
        if not stop.stopping.wait(WAKE * 5):  # the handler never ran: stop it, and fail
            rescued.append(time.monotonic())
            scheduler.shutdown(wait=False)

    helper = threading.Thread(target=another_thread)
    started = time.monotonic()
    helper.start()
    try:
        stop.run()
    finally:
        for number, handler in kept.items():
            signal.signal(number, handler)
        helper.join()
    assert not rescued, "the SIGTERM's handler did not run while the scheduler waited"
    assert time.monotonic() - started < 0.3 + WAKE * 3
