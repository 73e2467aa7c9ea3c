"""Pure building blocks: subjects, headers, ids, clock. Imports nothing else from natsd."""
