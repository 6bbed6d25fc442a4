"""Reading ``conf/``: the project (``project``: found from where you stand), its sources
(``sources``) and pipeline profiles (``profiles``), each file read strictly (``strict``:
an unknown key is an error with ``path:line``)."""

from jobs.config.profiles import (
    NS_MAX,
    NS_MIN,
    AirflowSettings,
    Profile,
    TimeRange,
    check_pipeline_file,
    load_airflow_settings,
    load_profile,
    parse_bytes,
)
from jobs.config.project import Project, ProjectNotFound, current_project, use_project
from jobs.config.sources import (
    FORMATS,
    KEY_COLUMNS,
    KINDS,
    TYPE_COLUMNS,
    Source,
    load_sources,
    pick_column,
    type_column,
)
from jobs.config.strict import ConfigError

__all__ = ["AirflowSettings", "ConfigError", "FORMATS", "KEY_COLUMNS", "KINDS", "NS_MAX", "NS_MIN", "Profile",
           "Project", "ProjectNotFound", "Source", "TYPE_COLUMNS", "TimeRange", "check_pipeline_file",
           "current_project", "load_airflow_settings", "load_profile", "load_sources", "parse_bytes", "pick_column",
           "type_column", "use_project"]
