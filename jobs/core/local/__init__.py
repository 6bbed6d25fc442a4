"""A pattern over a list of events, in this process: ``runner.run`` with the engine (or the
oracle, ``bruteforce``), the examples a pattern file carries (``examples``), and the build
that compiles the kernels ahead of time by running those examples (``aot_build``). It sits
above both the engine and the reference because it chooses between them.
"""
