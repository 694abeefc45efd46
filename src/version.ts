/** The gateway's version, reported as serverInfo.version and clientInfo.version. A test keeps it equal to package.json. */
export const VERSION = '0.1.0';
