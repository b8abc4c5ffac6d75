"""The step loop the recurrent decoders share: one ``torch.autograd.Function`` a loop
(``loop.py``), each piece's forward and backward (``ops.py``), which rows run at each step
(``active_rows.py``), the decoders' base (``recurrent_decoder.py``) and what beam search's
reorder keeps (``beam_rows.py``). It imports no family."""
