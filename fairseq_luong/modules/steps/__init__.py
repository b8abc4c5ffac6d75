"""The step loop the recurrent decoders share: one ``torch.autograd.Function`` a loop
(``loop.py``), each piece's forward and backward (``ops.py``), which rows run at each step
(``active_rows.py``), and the decoders' base (``recurrent_decoder.py``). It imports no family."""
