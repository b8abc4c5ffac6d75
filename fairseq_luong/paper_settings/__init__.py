"""The papers' settings (their training protocols), each written once, as fairseq-train options
and the papers' own numbers. Standard library only: recipes, studies and the archs read them.

``luong2015``     Luong, Pham & Manning (2015), section 4.1, and the rows of Tables 1, 2, 4, 6
``bahdanau2014``  Bahdanau, Cho & Bengio (2014), appendix B (RNNsearch's training)
``oka2022``       Oka, Tanaka & Nagata (NLP2022), perSPE: the systems of Tables 1-4
"""
