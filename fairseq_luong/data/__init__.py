"""Data: the package's text reader, and the perSPE data path (Oka, Tanaka & Nagata, NLP2022).

``text``                   the one line reader (only ``\\n`` ends a line), the one
                           control-character policy, the one normalisation of raw text,
                           outputs written whole or not at all; used by every tool
``japanese_chunker``       raw Japanese -> phrases (MeCab + IPADIC, nltk RegexpParser,
                           the grammar in ``ja_chunk_grammar.txt`` beside it)
``chunk_projection``       phrases -> one phrase id per SentencePiece piece, binarized
``target_chunks_dataset``  the ids in each batch, aligned with ``prev_output_tokens``

The command-line entry points are thin wrappers in ``scripts/data/``.
"""
