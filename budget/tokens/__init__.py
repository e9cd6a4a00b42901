"""The estimator's room: token estimates (``_tokens``, ``_textunits``, ``_memo``, the resume cache
``_estimates_cache``), the provider's usage (``_usage``) and the calibration learned from it
(``_calibration``), the context window (``_windows``) and prompt-too-long errors (``_overflow``).
Nothing is exported here: ``budget`` exports the public token names."""
