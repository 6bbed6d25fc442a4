"""ZStream's join plans (Kolchinsky & Schuster, section 4): the tree of a plan
(``trees``), the cost model that ranks plans (``costs``), the generators that choose one
behind one ``Planner`` interface (``planners/``: one file per generator; adding one adds
its file, a line in the registry and its name in ``language.pattern.PLAN_NAMES``), and
the JSON form in which a plan chosen on the driver travels to the executors
(``json_form``).
"""
