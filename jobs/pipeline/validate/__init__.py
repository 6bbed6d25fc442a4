"""The validate phase: Great Expectations suites on each batch of events before it is
committed and on each staged run of matches before it is published (``quality``), over the
check frames that join a run's bindings with their events (``check_frames``)."""
