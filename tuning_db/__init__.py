"""Shipped tuning databases (JSON, one file per device), installed as package data."""
