"""Developer scripts, and what they share with the tests (``cassette_flows``); they import nothing from ``tests``."""
