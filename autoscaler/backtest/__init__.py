"""`autoscaler backtest`: what would these autoscaler specs have done over this history?

`specs` reads the HPA / HorizontalAutoscaler files, `queries` derives each metric's PromQL
from the adapter's rules with the adapter's own translation code, `history` fetches the range
data in chunks (prometheus-api-client, pandas frames), `replay` steps the decision engine over
it with a load model, `report` writes the PNG, summary.json and the terminal table.
"""
