"""blendsql.retrieval"""
