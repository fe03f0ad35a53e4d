"""Package data: the BERT uncased WordPiece vocabulary of the bundled model, and its NOTICE."""
