"""Plain helpers the tests share: data, builders, servers, fakes. No tests and no fixtures here
(fixtures live in the conftest.py files); no test module imports another test module."""
