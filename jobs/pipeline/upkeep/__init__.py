"""What keeps the lake sound between and around the phases: the repair of a killed run
(``reconcile``), retractions (``retract``), the night's health checks and alerts
(``health_checks``) and its OpenLineage events (``lineage``)."""
