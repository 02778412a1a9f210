"""Moving a cluster to and from other launchers: ``tfdist-tui export`` formats
(:mod:`.export`, :mod:`.tfjob`) and ``tfdist-tui import`` (:mod:`.importer`)."""
