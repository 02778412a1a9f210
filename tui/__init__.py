"""tfdist-tui: a terminal controller for distributed TensorFlow parameter-server training.

The core (config, launch, supervisor, run directory, headless front end) never imports
Textual or TensorFlow; the Textual front end lives in :mod:`tui.app` and is imported lazily.
"""
