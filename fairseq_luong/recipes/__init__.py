"""What the recipes in ``examples/`` compute in Python rather than in their shell scripts.

``plan_tools``  a recipe's plan: GPUs, batch, the time of the paper's run, the disk it needs
``freshness``   when a derived file is up to date, and why not (stamps, keys, stale reasons)

Not part of the plugin that fairseq loads (``PLUGIN_MODULES``); the recipes import it.
"""
