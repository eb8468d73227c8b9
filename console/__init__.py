"""The approval console (`toolgate console`): approvers' inbox and cards in the browser, keys
made and kept by the browser (console-plan.md, issue 52 parts 1 and 2)."""
