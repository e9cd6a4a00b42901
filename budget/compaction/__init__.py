"""Compaction's room: when a request compacts (``_compacting``), the checkpoint and breaker
(``_compactor``, ``_checkpoint``), the pure part (``_compaction``, ``_compact_limits``) and the
summarizer's transcript (``_transcript``). Nothing is exported here (``budget.summarizers`` holds
the ready-made summarizers)."""
