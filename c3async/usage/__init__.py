"""Token and cost accounting per host session (``c3_status(view='sessions')``, ``c3async stats``):
``prices`` (the model price table), ``account`` (the incremental accountant)."""
