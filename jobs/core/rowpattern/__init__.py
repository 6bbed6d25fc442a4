"""Row pattern recognition: a ``patterns/NAME.sql`` file holding one ``SELECT * FROM source
MATCH_RECOGNIZE (...)`` statement, read without executing anything (``parser``), checked
(``checks``), compiled to a small program (``program``) and matched by a backtracking
interpreter of SQL:2016's definition as Trino implements it (``matcher``), its measures
and output rows by ``evaluate`` and ``output``. On the language layer; no Spark."""
