"""Building blocks of fairseq_luong's models, by family: ``luong/`` (Luong et al. 2015),
``rnnsearch/`` (Bahdanau et al. 2014), ``perspe/`` (Oka et al. 2022); ``steps/``, the step loop
both recurrent families share; and the pieces all of them use (``layers.py``, ``dropout.py``,
``autocast_safe_lstm.py``, ``cpu_sizes.py``, ``logit_averaging_ensemble.py``). A family imports only
what is below it: ``rnnsearch/`` takes Luong's concat score and global attention, and nothing
below imports a family."""
