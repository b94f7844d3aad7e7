"""blendsql.db"""
