"""The perSPE data path (Oka, Tanaka & Nagata, NLP2022), one module per step.

``text``                   one normalisation for raw text, line reading that splits on
                           ``\\n`` only, outputs written whole or not at all
``japanese_chunker``       raw Japanese -> phrases (MeCab + IPADIC, nltk RegexpParser,
                           the grammar in ``ja_chunk_grammar.txt`` beside it)
``chunk_projection``       phrases -> one phrase id per SentencePiece piece, binarized
``target_chunks_dataset``  the ids in each batch, aligned with ``prev_output_tokens``

The command-line entry points are thin wrappers in ``scripts/``.
"""
