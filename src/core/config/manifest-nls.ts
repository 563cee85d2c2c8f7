/** The package.nls.json key of a setting's description (package.json says `%<key>%`). */
export const settingDescriptionNlsKey = (settingKey: string): string => `config.${settingKey}.description`;
