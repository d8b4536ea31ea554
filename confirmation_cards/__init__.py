"""confirmation_cards."""
