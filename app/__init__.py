"""Assembly: settings, the ``franz`` command line, logging and lifespan wiring."""
