"""perSPE, Oka, Tanaka & Nagata (NLP2022): sinusoidal positions perturbed phrase by phrase, and the
relative position bias of its comparison rows."""
