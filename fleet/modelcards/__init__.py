"""Shipped model cards (JSON). Read them with `fleet.planning.modelcard.load_model_card`."""
