"""Noema: a personal agent that remembers, perceives and acts with care."""
