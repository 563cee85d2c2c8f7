// Dashboard webview entry (see src/vscode/dashboard).
export {};
