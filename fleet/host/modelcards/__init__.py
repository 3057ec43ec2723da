"""Shipped model cards (JSON). Read them with `fleet.host.modelcard.load_model_card`."""
