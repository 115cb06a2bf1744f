"""Floor 2, a reader: full-text search of what was said in every session: ``passages`` (a
transcript's lines -> what to index), ``store`` (the SQLite FTS5 shards), ``index`` (keeping
them current), ``query`` (what a person typed -> an FTS5 expression), ``find`` (answering from
the index). May import the ground, the catalog and the stores."""
