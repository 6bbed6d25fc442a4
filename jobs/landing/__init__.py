"""The landing files' format: what a source's raw files hold and how each row becomes a
typed event or a quarantined row, with no lake and no Spark. ``splits`` lists a source's
files and cuts them into splits; ``reading`` reads a split's lines and fields; ``typing``
types the columns (``convert`` is the definition); ``ids`` gives content-hash ids; ``files``
types a whole split or file. Ingest (``jobs.pipeline.ingest``) runs it on Spark's
executors; ``ses match`` runs it on one landing file.
"""
