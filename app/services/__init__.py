"""The use cases: everything both faces (app.web, app.api) and the CLI do goes through here."""
