"""ZStream's join plans (Kolchinsky & Schuster, section 4): the tree of a plan
(``trees``), the cost model that ranks plans (``costs``), the generators that choose one,
one class each behind one ``Planner`` interface (``planners``: adding a generator adds a
class and its name to ``language.pattern.PLAN_NAMES``), and the JSON form a plan chosen on
the driver travels in to the executors (``json_form``).
"""
