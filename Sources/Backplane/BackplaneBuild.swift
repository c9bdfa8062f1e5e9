/// What build of the backplane this is: `backplane --version`, the `backplane_build_info` metric.
public enum BackplaneBuild {
    /// Raised with each release; a wire or schema change that older SDKs or nodes cannot read
    /// raises the major number.
    public static let version = "0.16.0"
}
