"""Floor 2, a reader: token and cost accounting per host session (``c3_status(view='sessions')``,
``c3async stats``): ``prices`` (the model price table), ``reader`` (one transcript's new bytes,
in bounded pieces, only the usage lines decoded), ``account`` (the incremental accountant,
worker processes for a big first pass), ``totals`` (what it last wrote, folded: what the session
rows show). May import the ground, the catalog and the stores."""
