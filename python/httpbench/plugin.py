"""pytest plugin for httpbench (performance budgets and baselines).

Registered through the ``pytest11`` entry point. Fixtures and options are
added by the plugin issue; importing this module must stay cheap and must
never fail, since pytest loads it in every session of an environment that
has httpbench installed.
"""
