//! How a role of the store is declared: once, as the trait its backends
//! implement and as its forwarding through the store's circuit
//! ([`super::guarded::Guarded`]). Each method names its class, which
//! decides how the circuit bounds and counts it: `read` (a request's
//! read), `write` (a request's write) or `bg` (bookkeeping that retries by
//! itself). A method's result is written bare (`-> Chatbot` stands for
//! `-> StoreFut<'_, Chatbot>`); a default body, when there is
//! one, follows `=`.
//!
//! ```text
//! store_role! {
//!     /// Chatbots.
//!     pub trait Accounts {
//!         /// One chatbot.
//!         read fn get_chatbot(&self, id: &str) -> Chatbot;
//!     }
//! }
//! ```

macro_rules! store_role {
    (
        $(#[$meta:meta])*
        pub trait $role:ident {
            $(
                $(#[$mmeta:meta])*
                $class:ident fn $name:ident(&$self:ident $(, $arg:ident : $ty:ty)*) -> $out:ty $(= $default:block)?;
            )*
        }
    ) => {
        $(#[$meta])*
        pub trait $role: Send + Sync {
            $(
                store_role!(@method [$(#[$mmeta])*] $self $name [$($arg : $ty),*] $out $(= $default)?);
            )*
        }

        impl<S: $crate::store::Store> $role for $crate::store::guarded::Guarded<S> {
            $(
                fn $name(&$self $(, $arg: $ty)*) -> $crate::store::BoxFut<'_, $crate::store::StoreResult<$out>> {
                    $self.$class($self.inner.$name($($arg),*))
                }
            )*
        }
    };
    (@method [$(#[$mmeta:meta])*] $self:ident $name:ident [$($arg:ident : $ty:ty),*] $out:ty) => {
        $(#[$mmeta])*
        fn $name(&$self $(, $arg: $ty)*) -> $crate::store::BoxFut<'_, $crate::store::StoreResult<$out>>;
    };
    (@method [$(#[$mmeta:meta])*] $self:ident $name:ident [$($arg:ident : $ty:ty),*] $out:ty = $default:block) => {
        $(#[$mmeta])*
        fn $name(&$self $(, $arg: $ty)*) -> $crate::store::BoxFut<'_, $crate::store::StoreResult<$out>> $default
    };
}
