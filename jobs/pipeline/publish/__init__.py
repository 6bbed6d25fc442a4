"""The publish phase: staged, validated matches into ``matches/<pattern>`` with one commit
and a row in the runs table (``matches``), the night's publish steps and what they hold
back (``steps``), a ``.sql`` row pattern's night, matched on the executors and published
in one commit (``row_patterns``), and the SQL models built on the published tables
(``models``)."""
