"""Checks of what a user gives (options, keywords), below the models and the patches that both
run them: ``generation.py`` (generation and other option values; an option is named as the user
wrote it, flag or keyword, by ``fairseq_fixes.option_names``)."""
