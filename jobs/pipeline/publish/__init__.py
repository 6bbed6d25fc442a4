"""The publish phase: staged, validated matches into ``matches/<pattern>`` with one commit
and a row in the runs table (``matches``), the night's publish steps and what they hold
back (``steps``), and the SQL models built on the published tables (``models``)."""
