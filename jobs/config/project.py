"""The project: the folder that holds ``conf/pipeline.yaml`` and, beside it, ``patterns/``,
``models/``, ``expectations/`` and ``data/landing``. Found as dbt finds its project: from
``--project-dir``, else the ``SES_PROJECT_DIR`` environment variable, else the nearest folder
above the current one that holds ``conf/pipeline.yaml``; a checkout of this repository
used from outside any project is its own project (``make`` installs it editable)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jobs import environment
from jobs.core.errors import UserError

MARKER = Path("conf") / "pipeline.yaml"
CHECKOUT = Path(__file__).resolve().parents[2]  # the package's own checkout, if it is one


class ProjectNotFound(UserError):
    """No project where the user stands nor where they pointed."""


@dataclass(frozen=True)
class Project:
    root: Path

    @property
    def conf(self) -> Path:
        return self.root / "conf"

    @property
    def sources_file(self) -> Path:
        return self.conf / "sources.yaml"

    @property
    def pipeline_file(self) -> Path:
        """``conf/pipeline.yaml``, or the file ``SES_PIPELINE_CONF`` names."""
        other = environment.get("SES_PIPELINE_CONF")
        return self.resolve(other) if other else self.root / MARKER

    @property
    def references(self) -> Path:
        return self.conf / "reference"

    @property
    def patterns(self) -> Path:
        return self.root / "patterns"

    @property
    def models(self) -> Path:
        """``models/``, or the folder ``SES_MODELS`` names (relative to the project)."""
        other = environment.get("SES_MODELS")
        return self.resolve(other) if other else self.root / "models"

    @property
    def expectations(self) -> Path:
        return self.root / "expectations"

    @property
    def landing(self) -> Path:
        """The committed landing files (``data/landing``)."""
        return self.root / "data" / "landing"

    def resolve(self, path: str | Path) -> Path:
        """A path of a conf file: relative ones are relative to the project root."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else self.root / p

    def relative(self, path: Path | str) -> str:
        """``path`` as people read it: relative to the project when inside it."""
        p = Path(path)
        try:
            return str(p.resolve().relative_to(self.root))
        except ValueError:
            return str(p)

    @classmethod
    def find(cls, project_dir: str | Path | None = None, cwd: Path | None = None) -> Project:
        """``project_dir`` (``--project-dir``), else ``SES_PROJECT_DIR``, else the nearest
        folder from ``cwd`` (the current folder) upwards that holds ``conf/pipeline.yaml``,
        else this package's checkout."""
        given = project_dir or environment.get("SES_PROJECT_DIR")
        if given:
            root = Path(given).expanduser().resolve()
            if not (root / MARKER).is_file():
                how = "--project-dir" if project_dir else "SES_PROJECT_DIR"
                raise ProjectNotFound(f"{root} is not a project ({how}): it has no {MARKER}")
            return cls(root)
        here = (cwd or Path.cwd()).resolve()
        for folder in (here, *here.parents):
            if (folder / MARKER).is_file():
                return cls(folder)
        if (CHECKOUT / MARKER).is_file():
            return cls(CHECKOUT)
        raise ProjectNotFound(f"no project in {here} or above it (a project holds {MARKER}): "
                              "run ses in one, or give --project-dir or SES_PROJECT_DIR")


_current: Project | None = None


def current_project() -> Project:
    """The project of this process: the one ``use_project`` set (the CLI sets it from
    ``--project-dir``), else ``Project.find()``."""
    global _current
    if _current is None:
        _current = Project.find()
    return _current


def use_project(project: Project | None) -> Project | None:
    """Make ``project`` this process's project, and that of the processes it starts
    (``SES_PROJECT_DIR``; None: find it again); returns the one before."""
    global _current
    before, _current = _current, project
    if project is not None:
        environment.export("SES_PROJECT_DIR", str(project.root))
    return before
