"""The Textual front end (:mod:`tui.app.app`); :mod:`tui.app.controls` declares its keys and
never imports Textual, so the command line can read them without loading the app."""
