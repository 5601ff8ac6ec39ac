"""What both faces (the JSON API and the pages) share about HTTP: the database session, the
authenticated principal and its role checks, CSRF, typed request parameters and uploads."""
