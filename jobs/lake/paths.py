"""Where the lake's files are and how they are reached: paths under a local folder or URIs
of an object store, the pyarrow filesystem of either (with delta-rs's storage options, so
that the driver and the executors reach the same store), and one line for a storage
error."""

from __future__ import annotations

import os

OBJECT_STORES = ("s3://", "s3a://")


def storage_error(exc: OSError) -> str:
    """One line for a storage error: delta-rs reports an object store's failure as a chain
    of causes on many (coloured) lines; this keeps what failed, the request and the
    innermost cause."""
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    parts = [p.strip() for p in re.split(r"\n\s*↳", text) if p.strip()]
    if len(parts) <= 1:
        return text.strip() or type(exc).__name__
    request = next((p.split(" in ")[0] for p in parts
                    if p.startswith("Error performing ") and "://" in p), None)
    return (f"{parts[0]}: {parts[-1]}" + (f" ({request})" if request else "")
            + "; check the profile's storage_options (endpoint, credentials, region) and "
              "that the store is reachable from this host")


def file_name(path: str) -> str:
    """A data file's name, from its URI or from its path in the Delta log."""
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def join(root: str, *parts: str) -> str:
    """A path under ``root``: ``/`` for URIs, the OS separator for local paths."""
    return "/".join([root.rstrip("/"), *parts]) if "://" in root else os.path.join(root, *parts)


def filesystem(uri: str, storage_options: dict[str, str] | None = None):
    """(pyarrow filesystem, path in it) for a local path or a URI; an ``s3://`` or
    ``s3a://`` URI uses the delta-rs storage options' endpoint, credentials and region
    (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
    ``AWS_REGION``, ``AWS_ALLOW_HTTP``), so executors and driver reach the same store."""
    import pyarrow.fs as pafs

    if uri.startswith(OBJECT_STORES):
        return _s3(storage_options or {}), uri.split("://", 1)[1]
    return pafs.FileSystem.from_uri(uri if "://" in uri else "file://" + os.path.abspath(uri))


def s3_settings(storage_options: dict[str, str] | None) -> dict:
    """What delta-rs's S3 ``storage_options`` say (keys in any case), for the other
    clients of the same store (pyarrow here, Hadoop's s3a in ``jobs.spark.session``): endpoint,
    plain ``http``, region, access_key, secret_key, session_token (None: not given)."""
    o = {k.upper(): v for k, v in (storage_options or {}).items()}
    return {"endpoint": o.get("AWS_ENDPOINT_URL") or o.get("AWS_ENDPOINT"),
            "http": o.get("AWS_ALLOW_HTTP", "").lower() == "true",
            "region": o.get("AWS_REGION") or o.get("AWS_DEFAULT_REGION"),
            "access_key": o.get("AWS_ACCESS_KEY_ID"),
            "secret_key": o.get("AWS_SECRET_ACCESS_KEY"),
            "session_token": o.get("AWS_SESSION_TOKEN")}


def _s3(options: dict[str, str]):
    import pyarrow.fs as pafs

    s = s3_settings(options)
    kw = {k: s[k] for k in ("access_key", "secret_key", "session_token", "region")}
    if s["endpoint"]:
        scheme, _, host = s["endpoint"].rpartition("://")
        kw.update(endpoint_override=host.rstrip("/"), scheme=scheme or "https")
    return pafs.S3FileSystem(**{k: v for k, v in kw.items() if v is not None})
